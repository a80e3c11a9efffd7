audit {
  retention = "30m"
}
