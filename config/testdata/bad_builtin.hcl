builtin "chrome" {}
