//! SBFT-style replica (see DESIGN.md section 3).
