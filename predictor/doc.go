// Package predictor holds heliostat's predictors: job durations (package
// duration) and node demand (package demand).
package predictor
