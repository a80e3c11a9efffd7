plugin "Notes" {
  path = "notes"
}

plugin "9lives" {
  path = "cat"
}

plugin "this-name-is-far-too-long-to-be-a-plugin-name-because-it-has-over-64-chars" {
  path = "long"
}
