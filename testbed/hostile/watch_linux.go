package hostile

import (
	"path/filepath"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// watchOpens counts the opens of file from now on, by inotify on its directory: whatever
// process opens it, the kernel queues an event, and each call reads the queue to its end.
func watchOpens(t testing.TB, file string) func() int {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.InotifyAddWatch(fd, filepath.Dir(file), unix.IN_OPEN|unix.IN_ACCESS); err != nil {
		t.Fatalf("inotify watch: %v", err)
	}
	var mu sync.Mutex
	opens := 0
	name := filepath.Base(file)
	buf := make([]byte, 64<<10)
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		for {
			n, err := unix.Read(fd, buf)
			if err != nil || n <= 0 {
				return opens // EAGAIN: the queue is empty
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				end := off + unix.SizeofInotifyEvent + int(ev.Len)
				if cstring(buf[off+unix.SizeofInotifyEvent:end]) == name {
					opens++
				}
				off = end
			}
		}
	}
}

func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
