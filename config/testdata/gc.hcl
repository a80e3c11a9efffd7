gc {
  percent       = 800
  memory_budget = "1.5GiB"
}
