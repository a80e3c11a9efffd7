audit {
  retention = "1.5d"
  export    = ""
}
