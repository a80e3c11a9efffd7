audit {
  mode      = "strict"
  retention = "90d"
  export    = "/var/lib/toolhost/events"
}
