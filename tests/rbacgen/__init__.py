"""Tests of pyctrl.rbacgen."""
