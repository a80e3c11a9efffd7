package agents

// OwnerOf returns the claim rt writes as the owner of the agents it runs:
// "pid:nonce@machine". For the external tests only.
func OwnerOf(rt *Runtime) string { return rt.owner }
