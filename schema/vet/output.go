package vet

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/karpool/karpool/schema"
)

// Formats are the output formats of WriteReport.
var Formats = []string{"text", "json", "github"}

// WriteReport writes the findings in format: "text" (one line per finding and an indented hint),
// "json" (the Report), or "github" (GitHub Actions workflow commands, which put the findings on
// the lines of the pull request's diff).
func WriteReport(w io.Writer, r *Report, format string) error {
	switch format {
	case "text":
		for _, f := range r.Findings {
			fmt.Fprintln(w, f.String())
			if f.Hint != "" {
				fmt.Fprintln(w, "    hint:", f.Hint)
			}
		}
		return nil
	case "json":
		out := struct {
			*Report
			Errors   int    `json:"errors"`
			Warnings int    `json:"warnings"`
			Summary  string `json:"summary"`
		}{r, r.Errors(), r.Warnings(), r.Summary()}
		if out.Report.Findings == nil {
			out.Report.Findings = schema.Findings{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	case "github":
		for _, f := range r.Findings {
			level := "error"
			if f.Severity == schema.Warning {
				level = "warning"
			}
			props := []string{"file=" + ghProperty(f.File)}
			if f.Line > 0 {
				props = append(props, fmt.Sprintf("line=%d", f.Line), fmt.Sprintf("col=%d", f.Column))
			}
			props = append(props, "title="+ghProperty("karpool vet: "+f.Rule))
			msg := f.Message
			if f.Path != "" {
				msg = f.Path + ": " + msg
			}
			if f.Value != "" {
				msg += " (got " + f.Value + ")"
			}
			if f.Hint != "" {
				msg += "\nhint: " + f.Hint
			}
			fmt.Fprintf(w, "::%s %s::%s\n", level, strings.Join(props, ","), ghData(msg))
		}
		return nil
	}
	return fmt.Errorf("unknown output format %q: want text, json or github", format)
}

// ghData escapes the message of a workflow command.
func ghData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// ghProperty escapes a property value of a workflow command.
func ghProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
