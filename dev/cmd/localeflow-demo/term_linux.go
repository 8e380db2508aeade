package main

import (
	"os"
	"syscall"
	"unsafe"
)

// termWidth is the terminal's width in columns (0 when unknown).
func termWidth(f *os.File) int {
	var ws struct{ Row, Col, X, Y uint16 }
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws))); errno != 0 {
		return 0
	}
	return int(ws.Col)
}
