model "gpt" {
  type     = "anthropic"
  protocol = "xml"
}

model "demo" {
  type = "scripted"
}

model "gpt" {
  type        = "openai"
  max_retries = -1
}

model "Bad Name" {
  type = "openai"
}

runtime {
  provider      = "missing"
  max_turns     = 0
  max_wall_time = "soon"
  lease         = "0s"
}
