//! Deterministic discrete-event simulator (see DESIGN.md section 4).
