"""hta-tui's colour themes (Textual themes): a dark default, a light one and a high-contrast
one. Screens use only theme variables ($primary, $text-error ...), never raw colours, so a
theme here restyles everything; NO_COLOR (honoured by Textual) leaves a monochrome UI whose
states are still told apart by text and glyphs."""

from __future__ import annotations

from textual.theme import Theme

DARK = Theme(
    name="hta-dark",
    primary="#3B8FD9",
    secondary="#7AA6C9",
    accent="#F2A541",
    warning="#E8B04B",
    error="#E0605E",
    success="#5FB878",
    foreground="#DDDDDD",
    background="#16181C",
    surface="#1D2026",
    panel="#262A31",
    dark=True,
)

LIGHT = Theme(
    name="hta-light",
    primary="#1F5F9E",
    secondary="#3E7CB1",
    accent="#A8590A",
    warning="#9A6200",
    error="#B3261E",
    success="#2E7D32",
    foreground="#1B1B1B",
    background="#F7F7F5",
    surface="#EDEDEA",
    panel="#E0E0DC",
    dark=False,
    variables={"footer-key-foreground": "#1F5F9E"},
)

CONTRAST = Theme(
    name="hta-contrast",
    primary="#FFD700",
    secondary="#00FFFF",
    accent="#FF00FF",
    warning="#FFFF00",
    error="#FF5555",
    success="#00FF00",
    foreground="#FFFFFF",
    background="#000000",
    surface="#000000",
    panel="#1A1A1A",
    dark=True,
    luminosity_spread=0.0,
    text_alpha=1.0,
    variables={
        "footer-key-foreground": "#FFD700",
        "block-cursor-background": "#FFD700",
        "block-cursor-foreground": "#000000",
    },
)

THEMES: tuple[Theme, ...] = (DARK, LIGHT, CONTRAST)
DEFAULT = DARK.name
