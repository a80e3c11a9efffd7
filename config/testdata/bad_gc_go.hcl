gc {
  policy        = "go"
  percent       = 200
  memory_budget = 1073741824
}
