plugin "short" {
  path   = "a"
  sha256 = "e3b0c44298fc1c149afbf4c8996fb924"
}

plugin "nothex" {
  path   = "b"
  sha256 = "z3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
}
