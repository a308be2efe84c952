"""python_capability's concepts: where comparisons can be (`blocks`), how capability values are spelled
(`values`), reading one comparison and a condition of them (`reading`), finding every one in a file
(`finding`), and widening a condition (`widen`)."""
