data_dir   = ""
plugin_dir = ""

plugin "notes" {
  path = ""
}
