plugin "search" {
  path = "search"
  config {
    engine   = "bing"
    limit    = 10
    ratio    = 0.25
    big      = 12345678901234567890
    safe     = true
    nothing  = null
    tags     = ["a", "b"]
    mixed    = [1, "two", false, null]
    nested   = { a = [1, 2], b = true, c = { d = "deep" } }
    computed = 6 * 7
    joined   = "${"x"}-${1 + 1}"
    list_of  = [for s in ["a", "b"] : "${s}!"]
  }
}
