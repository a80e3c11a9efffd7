code {
  steps    = 0
  timeout  = "2h"
  memory   = "0B"
  calls    = -1
  output   = "lots"
  parallel = 65
}

role "scripter" {
  code {
    wall   = "1m"
    steps  = 1000000000001
    calls  = 1000001
    memory = "1025GiB"
  }
}
