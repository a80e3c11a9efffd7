data_dir = ["a"]

limits {
  max_output_lines = 1.5
  max_output_bytes = "many"
}

plugin "notes" {
  path         = "notes"
  args         = "-v"
  env          = { A = ["x"] }
  max_restarts = null
  restart      = var.policy
  sha256       = env(1, 2)
  config {
    huge = 1e400
    bad  = nosuchfunc()
  }
}
