gc {
  policy        = "fast"
  percent       = 0
  memory_budget = "32MiB"
}

gc {
}
