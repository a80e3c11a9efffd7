package server

import (
	"fmt"
	"testing"
	"time"
)

// TestTasksKeptBounded: an agent cannot make the front keep its tasks
// without bound by ending them faster than their TTL: past maxKeptTasks
// the oldest ended ones are forgotten, its working ones and other agents'
// are kept.
func TestTasksKeptBounded(t *testing.T) {
	var ts mcpTasks
	a := &mcpAgent{key: agentKey{scope: "cred:a"}}
	other := &mcpAgent{key: agentKey{scope: "cred:b"}}
	start := time.Now()
	task := func(n int, agent *mcpAgent, status string) *mcpTask {
		return &mcpTask{id: fmt.Sprintf("task_%d", n), agent: agent, created: start.Add(time.Duration(n) * time.Millisecond),
			status: status, cancel: func() {}}
	}
	ts.add(task(0, a, taskWorking)) // the oldest, but working
	ts.add(task(1, other, taskCompleted))
	for n := 2; n < maxKeptTasks+12; n++ {
		ts.add(task(n, a, taskCompleted))
	}
	mine := 0
	for _, tk := range ts.tasks {
		if tk.agent == a {
			mine++
		}
	}
	if mine != maxKeptTasks {
		t.Errorf("the agent holds %d tasks, want %d", mine, maxKeptTasks)
	}
	for id, want := range map[string]bool{"task_0": true, "task_1": true, "task_2": false, "task_12": false, "task_13": true,
		fmt.Sprintf("task_%d", maxKeptTasks+11): true} {
		if _, ok := ts.tasks[id]; ok != want {
			t.Errorf("%s kept: %v, want %v", id, ok, want)
		}
	}
}
