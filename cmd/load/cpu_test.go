package main

import (
	"os"
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

// The disk writes of a window are write_bytes of /proc/PID/io at its ends, per command; a side
// that could not be read leaves the figure at 0 rather than counting from nothing.
func TestWrittenPerCommand(t *testing.T) {
	text := "rchar: 4096\nwchar: 5000\nsyscr: 3\nsyscw: 4\nread_bytes: 0\nwrite_bytes: 31825\ncancelled_write_bytes: 4096\n"
	if got := writeBytes([]byte(text)); got != 31825 {
		t.Errorf("writeBytes = %d, want 31825 (not cancelled_write_bytes)", got)
	}
	if got := writeBytes([]byte("rchar: 1\n")); got != -1 {
		t.Errorf("writeBytes of no write_bytes = %d, want -1", got)
	}
	if got := procWritten(-1); got != -1 {
		t.Errorf("procWritten of no process = %d, want -1", got)
	}
	if _, err := os.Stat("/proc/self/io"); err == nil && procWritten(os.Getpid()) < 0 {
		t.Errorf("procWritten of this process is unknown")
	}

	start := time.Now()
	a := cpuSample{at: start, written: 1000}
	b := cpuSample{at: start.Add(time.Second), written: 31000}
	if got := cpuBetween(a, b, 10).TargetWrittenPerCommand; got != 3000 {
		t.Errorf("written per command = %v, want 3000", got)
	}
	a.written = -1
	if got := cpuBetween(a, b, 10).TargetWrittenPerCommand; got != 0 {
		t.Errorf("written per command from an unread sample = %v, want 0", got)
	}
}
