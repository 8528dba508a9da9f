// Package demand forecasts GPU-node demand — the number of nodes with at least
// one busy GPU — for Cluster Energy Saving: how many nodes a power plan must
// keep on over the next horizon.
//
// Forecasts are strictly causal: one issued at time t reads only the demand of
// steps that ended by t, and the models a backtest uses were trained only on
// steps that ended before the decision. The forecaster is linear (ridge least
// squares solved by github.com/sajari/regression, wrapped in the immutable
// Model) on lags, rolling statistics and calendar terms; Backtest scores it
// against repeating the last value and the value a day earlier.
package demand
