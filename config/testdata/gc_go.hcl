gc {
  policy = "go"
}
