gc {
  percent       = "lots"
  memory_budget = "2 GiG"
}
