listen = "localhost"
colour = "blue"

limits {
  timeout          = "soon"
  max_output_lines = 0
}

plugin "Bad Name" {
  path    = "x"
  restart = "sometimes"
}

plugin "notes" {
  sha256 = "abc"
}

builtin "chrome" {}
