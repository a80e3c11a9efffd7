store {
  agent_retention = "1d12h"
}
