mcp_server "docs" {
  url     = "https://docs.example.com/mcp?client=vscode"
  headers = {
    User-Agent = "vscode \"insiders\" // not a comment"
    X-Session  = env("DOCS_X_SESSION")
  }
}

# "local-tools" command holds "${workspaceFolder}", which the client would expand and toolhost does not: set what it stands for
# "local-tools" args[1] holds "${userHome}", which the client would expand and toolhost does not: set what it stands for
# not imported: "envFile"
mcp_server "local-tools" {
  command = "$${workspaceFolder}/bin/tools"
  args    = ["--home", "$${userHome}", "--cache", "${env("XDG_CACHE_HOME")}/tools"]

  sandbox {
  }
}

# from "Perplexity"
mcp_server "perplexity" {
  command = "npx"
  args    = ["-y", "server-perplexity-ask"]
  env     = { PERPLEXITY_API_KEY = env("PERPLEXITY_PERPLEXITY_API_KEY") }

  sandbox {
    # npx fetches the server's code each time it starts it: so it may reach the network, through
    # toolhost's filtering proxy, and what it downloads stays in the sandbox's own HOME, gone at exit.
    # Better: npm install --prefix DIR PACKAGE, then command = "DIR/node_modules/.bin/NAME",
    # which starts without the network and runs the code you installed (import it again for its paths).
    network = "allowed"
  }
}

# Secrets stay out of this file: set these in toolhost's environment (values not printed here).
# export DOCS_X_SESSION=<the value of "docs" header X-Session in vscode_mcp.json, with "${input:session}" as the client fills it in>
# export PERPLEXITY_PERPLEXITY_API_KEY=<the value of "Perplexity" env PERPLEXITY_API_KEY in vscode_mcp.json, with "${input:perplexity-key}" as the client fills it in>

# These come from the client's environment (${…} in vscode_mcp.json): set them in toolhost's too.
# export XDG_CACHE_HOME=<as the client has it>
