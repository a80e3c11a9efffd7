listen = "127.0.0.1:${env("PORT")}"

plugin "notes" {
  path = env("NOTES_BIN")
  env = {
    NOTES_DIR = env("NOTES_DIR")
    UNSET     = env("NOT_SET")
  }
  config {
    token = env("TOKEN")
    greeting = "hello ${env("USER")}"
  }
}
