// Empty translation unit so that reap_llama exists before its sources land.
