//go:build !race

package ssd

const raceEnabled = false
