mcp_server "filesystem" {
  command = "npx"
  args    = ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop", "/srv/ws", "/home/me"]

  sandbox {
    # npx fetches the server's code each time it starts it: so it may reach the network, through
    # toolhost's filtering proxy, and what it downloads stays in the sandbox's own HOME, gone at exit.
    # Better: npm install --prefix DIR PACKAGE, then command = "DIR/node_modules/.bin/NAME",
    # which starts without the network and runs the code you installed (import it again for its paths).
    # args[2] "/Users/me/Desktop" is not on this machine: once it is, add it to read_write (a directory) or read_only (a file)
    read_write = [
      "/srv/ws",
      # toolhost would refuse this one: mcp_server "filesystem"'s writable path /home/me holds the config file /home/me/toolhost/config.hcl
      # "/home/me",
    ]
    network = "allowed"
  }
}

mcp_server "fs" {
  command = "npx"
  args    = ["-y", "some-mcp-server", "/srv/ws"]
  env     = { API_KEY = env("FS_API_KEY"), LOG_LEVEL = "debug" }

  sandbox {
    # npx fetches the server's code each time it starts it: so it may reach the network, through
    # toolhost's filtering proxy, and what it downloads stays in the sandbox's own HOME, gone at exit.
    # Better: npm install --prefix DIR PACKAGE, then command = "DIR/node_modules/.bin/NAME",
    # which starts without the network and runs the code you installed (import it again for its paths).
    read_write = ["/srv/ws"]
    network    = "allowed"
  }
}

# from "GitHub Tools"
mcp_server "github_tools" {
  command = "docker"
  args    = ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.example.com/github-mcp-server"]
  env     = {
    GITHUB_HOST                  = "github.example.com"
    GITHUB_PERSONAL_ACCESS_TOKEN = env("GITHUB_TOKEN")
  }

  sandbox {
    # docker needs its daemon's socket, which this sandbox leaves out: whoever may write to it is root
    # on this machine. Add read_write = ["/var/run/docker.sock"] only if you accept that.
  }
}

# type "sse" in claude_desktop_config.json: toolhost speaks streamable HTTP only, so this server must offer it at this url
mcp_server "legacy-events" {
  url     = "https://events.example.com/sse"
  headers = { X-Api-Key = env("LEGACY_EVENTS_X_API_KEY") }
}

# from "2nd.brain"
mcp_server "mcp_2nd_brain" {
  command = "node"
  args    = ["/opt/brain/index.js", "--db", env("MCP_2ND_BRAIN_DB")]
  env     = { DEBUG = "true", NOTES_DIR = "/var/notes", PORT = "8080" }

  sandbox {
    read_only = ["/opt/brain"]
  }
}

# from "Tool Search": a reserved group id, so prefixed with mcp_
mcp_server "mcp_tool_search" {
  url = "http://127.0.0.1:9000/mcp"
}

# from "workspace": a reserved group id, so prefixed with mcp_
# "workspace" args[2] holds "${workspaceFolder}", which the client would expand and toolhost does not: set what it stands for
# not imported: "cwd"
mcp_server "mcp_workspace" {
  command = "uvx"
  args    = ["workspace-mcp", "--root", "$${workspaceFolder}"]

  sandbox {
    # uvx fetches the server's code each time it starts it: so it may reach the network, through
    # toolhost's filtering proxy, and what it downloads stays in the sandbox's own HOME, gone at exit.
    # Better: uv tool install PACKAGE (or pipx install PACKAGE), then command = the script it installs,
    # which starts without the network and runs the code you installed (import it again for its paths).
    network = "allowed"
  }
}

mcp_server "remote" {
  url     = "https://mcp.example.com/mcp"
  headers = { Accept-Language = "en", Authorization = env("REMOTE_AUTHORIZATION") }
}

# not imported: "disabled"
mcp_server "search-engine" {
  command = "search-mcp"
  args    = ["--api-key", env("SEARCH_ENGINE_API_KEY"), "--token=${env("SEARCH_ENGINE_TOKEN")}"]
  env     = { SLACK_BOT = env("SEARCH_ENGINE_SLACK_BOT") }

  sandbox {
    read_only = ["/home/me/.local/lib/node_modules"]
  }
}

# from "Search Engine"
mcp_server "search_engine" {
  url     = "https://search.example.com/mcp"
  headers = { Authorization = "Bearer ${env("SEARCH_TOKEN")}" }
}

# from "Search_Engine"
mcp_server "search_engine_2" {
  command = "uvx"
  args    = ["search-engine-mcp"]
  env     = { DATABASE_URL = env("SEARCH_ENGINE_2_DATABASE_URL"), SEARCH_REGION = "eu" }

  sandbox {
    # uvx fetches the server's code each time it starts it: so it may reach the network, through
    # toolhost's filtering proxy, and what it downloads stays in the sandbox's own HOME, gone at exit.
    # Better: uv tool install PACKAGE (or pipx install PACKAGE), then command = the script it installs,
    # which starts without the network and runs the code you installed (import it again for its paths).
    network = "allowed"
  }
}

# Secrets stay out of this file: set these in toolhost's environment (values not printed here).
# export FS_API_KEY=<the value of "fs" env API_KEY in claude_desktop_config.json>
# export LEGACY_EVENTS_X_API_KEY=<the value of "legacy-events" header X-Api-Key in claude_desktop_config.json>
# export MCP_2ND_BRAIN_DB=<the value of "2nd.brain" args[2] in claude_desktop_config.json>
# export REMOTE_AUTHORIZATION=<the value of "remote" header Authorization in claude_desktop_config.json>
# export SEARCH_ENGINE_API_KEY=<the value of "search-engine" args[1] in claude_desktop_config.json>
# export SEARCH_ENGINE_TOKEN=<the value of "search-engine" args[2] in claude_desktop_config.json, after --token=>
# export SEARCH_ENGINE_SLACK_BOT=<the value of "search-engine" env SLACK_BOT in claude_desktop_config.json>
# export SEARCH_ENGINE_2_DATABASE_URL=<the value of "Search_Engine" env DATABASE_URL in claude_desktop_config.json>

# These come from the client's environment (${…} in claude_desktop_config.json): set them in toolhost's too.
# export GITHUB_TOKEN=<as the client has it>
# export SEARCH_TOKEN=<as the client has it>
