"""What the UI example's offline model answers (examples/ui/app.py), for the tests."""

STORY = "Here is a longer answer, streamed in small pieces so you can watch it arrive. " * 4
WEATHER = "Done: Sunny and 21 °C in Porto. " + STORY[:120]
CITED = "Green tea is not oxidised, and the 2026 harvest came early."
