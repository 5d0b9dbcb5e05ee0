//go:build linux

package upstream

import (
	"net"
	"syscall"
)

// peekAlive reports whether an idle connection is still open, with one
// non-blocking peek: EAGAIN means no data and no FIN, so the server still
// holds it. Zero bytes (the server closed it, e.g. its keep-alive timeout) or
// data (an answer nobody asked for) make it unusable.
func peekAlive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		for {
			_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if err == syscall.EINTR {
				continue
			}
			alive = err == syscall.EAGAIN
			return true // done: never wait for the socket to become readable
		}
	})
	return err == nil && alive
}
