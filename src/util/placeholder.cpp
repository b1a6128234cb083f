// Empty translation unit so that reap_core exists before its sources land.
