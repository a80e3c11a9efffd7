metrics {
  public = "sometimes"
  path   = "/prom"
}

metrics {
  public = false
}
