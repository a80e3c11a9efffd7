plugin "search" {
  path = "search"
  config {
    engine = "bing"
    proxy {
      url = "http://proxy"
    }
  }
}
