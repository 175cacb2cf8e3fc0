package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"
)

// CPU is where the processor time went during a measured window, the figures of a shared
// machine meaning little without it, and what the target wrote to disk in that window, read
// at the same ends.
type CPU struct {
	Target  float64 `json:"targetCores"`  // the server (or baseline) process
	Harness float64 `json:"harnessCores"` // this tool: the clients
	Others  float64 `json:"otherCores"`   // every other process on the machine
	// Stolen is the time the hypervisor gave this machine's processors to other machines
	// (steal in /proc/stat). Neither the target nor anything else here ran then, and a
	// neighbour busy enough to take it slows what does run (shared caches): figures of a
	// window with much of it are not comparable with a quiet one's.
	Stolen float64 `json:"stolenCores"`
	Idle   float64 `json:"idleCores"`
	// TargetPerCommand is the target's processor time per acknowledged command.
	TargetPerCommand time.Duration `json:"targetPerCommandNs"`
	// TargetWrittenPerCommand is the bytes the target caused to be sent to the storage layer
	// (write_bytes of /proc/PID/io) per acknowledged command: a sync that rewrites whole pages
	// costs the disk far more than the bytes of the command. 0 where unknown.
	TargetWrittenPerCommand float64 `json:"targetWrittenBytesPerCommand"`
}

// cpuSample is a reading of the processor time spent so far.
type cpuSample struct {
	at                      time.Time
	target, harness         time.Duration
	machineBusy, machineAll time.Duration
	machineStolen           time.Duration // in machineBusy too
	written                 int64         // the target's write_bytes; -1 where unreadable
}

// clockTick is the unit of /proc times (USER_HZ), 100 on Linux for every architecture Go
// supports.
const clockTick = 10 * time.Millisecond

// sampleCPU reads the processor time of process pid, of this process and of the machine. On
// a system without /proc it returns a zero sample.
func sampleCPU(pid int) cpuSample {
	s := cpuSample{at: time.Now(), target: procCPU(pid), harness: procCPU(os.Getpid()), written: procWritten(pid)}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	for i, f := range fields[1:] {
		n, _ := strconv.ParseInt(f, 10, 64)
		if i >= 8 { // guest times are already in user and nice
			break
		}
		s.machineAll += time.Duration(n) * clockTick
		if i != 3 && i != 4 { // idle, iowait
			s.machineBusy += time.Duration(n) * clockTick
		}
		if i == 7 {
			s.machineStolen = time.Duration(n) * clockTick
		}
	}
	return s
}

// procCPU is the user and system time of process pid so far.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: count fields after it.
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * clockTick
}

// procWritten is the bytes process pid has caused to be sent to the storage layer so far, or
// -1 where /proc does not tell (no such process, another user's, no /proc).
func procWritten(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return -1
	}
	return writeBytes(b)
}

// writeBytes reads write_bytes from the text of /proc/PID/io, or -1 if it has none.
func writeBytes(text []byte) int64 {
	for line := range strings.Lines(string(text)) {
		if v, ok := strings.CutPrefix(line, "write_bytes:"); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// cpuBetween is the use of the processors between two samples.
func cpuBetween(a, b cpuSample, commands int) CPU {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return CPU{}
	}
	cores := func(d time.Duration) float64 { return d.Seconds() / wall }
	c := CPU{
		Target:  cores(b.target - a.target),
		Harness: cores(b.harness - a.harness),
		Stolen:  cores(b.machineStolen - a.machineStolen),
		Idle:    cores((b.machineAll - a.machineAll) - (b.machineBusy - a.machineBusy)),
	}
	c.Others = max(0, cores(b.machineBusy-a.machineBusy)-c.Stolen-c.Target-c.Harness)
	if commands > 0 {
		c.TargetPerCommand = (b.target - a.target) / time.Duration(commands)
		if a.written >= 0 && b.written >= a.written {
			c.TargetWrittenPerCommand = float64(b.written-a.written) / float64(commands)
		}
	}
	return c
}

// Quiet is when a process counts as idle: below this share of one processor over quietSpan.
const (
	quietShare  = 0.05
	quietSpan   = 250 * time.Millisecond
	quietAtMost = 30 * time.Second
)

// awaitQuiet waits until process pid has been idle for quietSpan (see quietShare), at most
// atMost, and returns how long it waited. A phase of replays starts so: what the server
// still does after the commands before it (read models, outcomes recorded after their
// answers, copying its log) is not the replays' cost.
func awaitQuiet(ctx context.Context, pid int, atMost time.Duration) time.Duration {
	start := time.Now()
	last := procCPU(pid)
	for time.Since(start) < atMost {
		if sleepCtx(ctx, quietSpan); ctx.Err() != nil {
			break
		}
		now := procCPU(pid)
		if float64(now-last) < quietShare*float64(quietSpan) {
			break
		}
		last = now
	}
	return time.Since(start)
}
