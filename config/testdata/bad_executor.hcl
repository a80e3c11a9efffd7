executor {
  mode     = "sometimes"
  approver = "bob"
  approve  = "everything"
}

plugin "notes" {
  path = "notes"
  tool "Add Note" {}
  tool "get_note" {
    timeout = "never"
  }
  tool "get_note" {}
}
