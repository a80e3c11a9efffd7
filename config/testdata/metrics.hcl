metrics {
  public = true
}
