package operator

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/go-logr/logr"
)

// NewJSONLogger writes one JSON object per line with the keys Karpenter's logs use ("level",
// "time", "logger", "message"), so the log lines people grep for ("launched nodeclaim", ...) look
// the same. slog.LevelDebug enables V(1) messages.
func NewJSONLogger(w io.Writer, level slog.Level) logr.Logger {
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.MessageKey:
				a.Key = "message"
			case slog.LevelKey:
				a.Value = slog.StringValue(strings.ToUpper(levelName(a.Value.Any())))
			}
			return a
		},
	})
	return logr.FromSlogHandler(h)
}

// ParseLogLevel reads Karpenter's LOG_LEVEL values: debug, info, warn or error.
func ParseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q: use debug, info, warn or error", s)
}

func levelName(v any) string {
	l, ok := v.(slog.Level)
	if !ok {
		return "INFO"
	}
	switch {
	case l < slog.LevelInfo:
		return "DEBUG"
	case l < slog.LevelWarn:
		return "INFO"
	case l < slog.LevelError:
		return "WARN"
	default:
		return "ERROR"
	}
}
