"""What Legion says about itself for those who look into it: named fault points for the
fault-injection tests (`faults`) and timing spans (`tracing`)."""
