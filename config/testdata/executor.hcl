executor {
  mode               = "concurrent"
  max_parallel       = 8
  approver           = "approve"
  approval_timeout   = "1m"
  idempotency_window = "1h"
}

plugin "notes" {
  path              = "notes"
  requires_approval = true
  limits {
    timeout          = "5s"
    max_output_lines = 100
  }
  tool "add_note" {
    timeout           = "2s"
    requires_approval = false
  }
  tool "get_note" {
    requires_approval = true
  }
}
