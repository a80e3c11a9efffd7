model "local" {
  type     = "openai"
  base_url = "http://127.0.0.1:11434/v1"
  model    = "qwen3"
  api_key  = env("MODEL_KEY")
  protocol = "json"
  timeout  = "30s"
  max_retries = 0
}

model "demo" {
  type   = "scripted"
  script = "demo/script.json"
}

runtime {
  provider        = "demo"
  max_turns       = 20
  max_wall_time   = "2m"
  max_tokens      = 50000
  context_budget  = 32000
  no_progress     = 2
  max_bad_outputs = 4
  keep_recent     = 6
  workspace       = "work"
  lease           = "30s"
}
