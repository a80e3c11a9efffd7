role "dev" {
  rule "no sudo" {
    action = "deny"
  }
  rule "a" {
    tools  = ["Run", "group:"]
    when   = "args.command.contains('sudo'"
    action = "refuse"
  }
  rule "a" {
    when   = "nope == 1"
    action = "deny"
  }
  rule "b" {
    when = "args.command"
    action = "allow"
  }
  rule "c" {
    when   = "'a' + 'b'"
    action = "deny"
    colour = "red"
  }
  rule "d" {
    when = "true"
  }
  limit "Run Command" {
    calls = 0
    per   = "soon"
  }
  limit "group:command" {
    calls = 5
  }
  limit "*" {
    calls = 2.5
    per   = "-1m"
  }
}
