package handler

import (
	"io"
	"log/slog"

	"github.com/localeflow/localeflow/internal/lambdalog"
)

// NewLogger returns the function's JSON logger with the Lambda request id
// ("request_id"); see lambdalog.New.
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return lambdalog.New(w, level)
}
