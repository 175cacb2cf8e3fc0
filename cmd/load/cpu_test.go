package main

import (
	"testing"
	"time"
)

func TestStolenTimeIsNotOtherProcesses(t *testing.T) {
	start := time.Now()
	a := cpuSample{at: start, machineAll: 10 * time.Second, machineBusy: 4 * time.Second, machineStolen: time.Second}
	// One second, two cores: the target ran 0.5 s, the harness 0.25 s, the hypervisor took
	// 0.5 s and other processes ran 0.25 s; the rest was idle.
	b := cpuSample{at: start.Add(time.Second), target: 500 * time.Millisecond, harness: 250 * time.Millisecond,
		machineAll: 12 * time.Second, machineBusy: 5500 * time.Millisecond, machineStolen: 1500 * time.Millisecond}
	got := cpuBetween(a, b, 100)
	want := CPU{Target: 0.5, Harness: 0.25, Others: 0.25, Stolen: 0.5, Idle: 0.5, TargetPerCommand: 5 * time.Millisecond}
	if got != want {
		t.Errorf("cpuBetween = %+v, want %+v", got, want)
	}
}
