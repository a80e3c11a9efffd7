limits {
  timeout          = 30
  max_output_lines = 0
  max_output_bytes = -1
}
