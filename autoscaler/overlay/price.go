package overlay

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The API server checks these patterns (the CRD's); files planned without it are checked here
// too, so a plan never prices with a string the cluster would refuse.
var (
	pricePattern      = regexp.MustCompile(`^\d+(\.\d+)?$`)
	adjustmentPattern = regexp.MustCompile(`^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$`)
)

// change is a parsed price or priceAdjustment: the new price is abs when absolute, else
// old*(1+pct/100) or old+delta, never below zero.
type change struct {
	absolute bool
	percent  bool
	value    float64
}

// parsePrice reads spec.price.
func parsePrice(s string) (change, error) {
	if !pricePattern.MatchString(s) {
		return change{}, fmt.Errorf("spec.price %q is not a price in dollars per hour such as 0.25", s)
	}
	v, err := strconv.ParseFloat(s, 64)
	return change{absolute: true, value: v}, err
}

// parseAdjustment reads spec.priceAdjustment.
func parseAdjustment(s string) (change, error) {
	if !adjustmentPattern.MatchString(s) {
		return change{}, fmt.Errorf("spec.priceAdjustment %q is neither a signed amount such as -0.05 nor a percentage such as -15%% (at most -100%%)", s)
	}
	c := change{percent: strings.HasSuffix(s, "%")}
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	c.value = v
	return c, err
}

// apply is the instance's new hourly price.
func (c change) apply(price float64) float64 {
	switch {
	case c.absolute:
		return c.value
	case c.percent:
		price *= 1 + c.value/100
	default:
		price += c.value
	}
	return max(price, 0)
}
